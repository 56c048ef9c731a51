# buildgen_add_models(): compiled models as ordinary CMake targets.
#
#   find_package(buildgen CONFIG REQUIRED)
#   buildgen_add_models(MANIFEST BUILD.yaml)
#   target_link_libraries(app PRIVATE buildgen::mlp_cpu)
#
#   buildgen_add_models(MANIFEST <path>          # relative to CMAKE_CURRENT_SOURCE_DIR
#                       [MODELS <model>...]      # default: every model of the manifest
#                       [TARGETS <target>...]    # default: every target of those models
#                       [BUILD_DIR <dir>]        # default: ${CMAKE_CURRENT_BINARY_DIR}/buildgen
#                       [EXCLUDE_FROM_ALL])      # build only what something links
#
# For each model <m> and target <t>:
#   buildgen::<m>_<t>         static library (real target buildgen_<m>_<t>)
#   buildgen::<m>_<t>_shared  shared library (real target buildgen_<m>_<t>_shared)
# Both are lib<m>.a / lib<m>.so in <BUILD_DIR>/<m>/<t>/, carry the include folder of <m>.h
# and every backend's link flags, have the header as PUBLIC_HEADER and EXPORT_NAME <m>_<t>
# (or <m>_<t>_shared), so install(TARGETS buildgen_<m>_<t> EXPORT ... PUBLIC_HEADER
# DESTINATION include INCLUDES DESTINATION include) + install(EXPORT ... NAMESPACE
# buildgen::) installs them under the same names.
#
# How it works. At configure time `python -m buildgen cmake` writes the option files and a
# CMakeLists.txt fragment made from the same build plan as build.ninja; this adds it with
# add_subdirectory(), its binary dir being BUILD_DIR. The fragment calls the helpers of
# buildgenFragment.cmake: one add_custom_command per buildgen action (import, partition,
# codegen, executor, report, shared kernels), the generated sources compiled by CMake
# itself, libraries linked by CMake. The manifest,
# buildgen's rules and schemas are CMAKE_CONFIGURE_DEPENDS, so editing the manifest re-runs
# configure, and with it the fragment generation, inside the next `cmake --build`.
#
# Cross builds. With CMAKE_CROSSCOMPILING set (a toolchain file), the models' targets whose
# host names no triple build for the project's toolchain: the triple of its C compiler
# (CMAKE_C_COMPILER_TARGET, else `${CMAKE_C_COMPILER} -dumpmachine`, else
# ${CMAKE_SYSTEM_PROCESSOR}-linux-gnu), CMAKE_C_COMPILER itself, CMAKE_SYSROOT and
# CMAKE_CROSSCOMPILING_EMULATOR (buildgen's `emulator`). A host whose manifest names a
# triple keeps it. A backend that cannot cross (onednn, openblas) is a configure error.
#
# The Python interpreter: BUILDGEN_PYTHON if set, else the first of Python3_EXECUTABLE,
# Python_EXECUTABLE, the interpreter installed beside this package and python3/python on the
# PATH that imports this very buildgen with its dependencies.

include_guard(GLOBAL)
# Functions run with the policies in force where they were defined, so the helpers below
# keep these settings whatever the calling project sets.
cmake_policy(PUSH)
cmake_policy(VERSION 3.20...3.31)

# A global property, not a variable: the helpers also run in the fragment's directory and
# in projects that call find_package() in one directory and buildgen_add_models() in another.
set_property(GLOBAL PROPERTY _BUILDGEN_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}")

function(buildgen_add_models)
  cmake_parse_arguments(PARSE_ARGV 0 arg "EXCLUDE_FROM_ALL" "MANIFEST;BUILD_DIR"
                        "MODELS;TARGETS")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "buildgen_add_models: unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_MANIFEST)
    message(FATAL_ERROR "buildgen_add_models: MANIFEST <path> is required")
  endif()
  cmake_path(ABSOLUTE_PATH arg_MANIFEST BASE_DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}"
             NORMALIZE OUTPUT_VARIABLE manifest)
  if(NOT EXISTS "${manifest}")
    message(FATAL_ERROR "buildgen_add_models: no manifest at ${manifest}")
  endif()
  if(arg_BUILD_DIR)
    cmake_path(ABSOLUTE_PATH arg_BUILD_DIR BASE_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}"
               NORMALIZE OUTPUT_VARIABLE build_dir)
  else()
    set(build_dir "${CMAKE_CURRENT_BINARY_DIR}/buildgen")
  endif()
  get_property(used GLOBAL PROPERTY _BUILDGEN_BUILD_DIRS)
  if(build_dir IN_LIST used)
    message(FATAL_ERROR "buildgen_add_models(MANIFEST ${arg_MANIFEST}): ${build_dir} is "
                        "already the BUILD_DIR of another call; give this one its own BUILD_DIR")
  endif()
  set_property(GLOBAL APPEND PROPERTY _BUILDGEN_BUILD_DIRS "${build_dir}")

  # Before running buildgen: a manifest it rejects must still re-run configure once fixed.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${manifest}")
  _buildgen_python(python)
  set(command "${python}" -m buildgen cmake --manifest "${manifest}" --build-dir "${build_dir}")
  foreach(model IN LISTS arg_MODELS)
    list(APPEND command --model "${model}")
  endforeach()
  foreach(target IN LISTS arg_TARGETS)
    list(APPEND command --target "${target}")
  endforeach()
  _buildgen_cross_arguments(cross)
  list(APPEND command ${cross})
  file(MAKE_DIRECTORY "${build_dir}")
  execute_process(COMMAND ${command} RESULT_VARIABLE failed OUTPUT_VARIABLE fragment_dir
                  WORKING_DIRECTORY "${build_dir}"
                  ERROR_VARIABLE errors OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(failed)
    message(FATAL_ERROR "buildgen_add_models(MANIFEST ${arg_MANIFEST}) failed:\n${errors}")
  endif()
  set(exclude "")
  if(arg_EXCLUDE_FROM_ALL)
    set(exclude EXCLUDE_FROM_ALL)
  endif()
  add_subdirectory("${fragment_dir}" "${build_dir}" ${exclude})
endfunction()

# `buildgen cmake`'s --cross-* arguments in a cross build (CMAKE_CROSSCOMPILING), else none.
function(_buildgen_cross_arguments out)
  set(${out} "" PARENT_SCOPE)
  if(NOT CMAKE_CROSSCOMPILING)
    return()
  endif()
  get_property(enabled GLOBAL PROPERTY ENABLED_LANGUAGES)
  set(triple "")
  set(compiler "")
  foreach(language IN ITEMS C CXX)
    if(language IN_LIST enabled AND CMAKE_${language}_COMPILER)
      set(compiler "${CMAKE_${language}_COMPILER}")
      set(compiler_language ${language})
      break()
    endif()
  endforeach()
  if(compiler AND CMAKE_${compiler_language}_COMPILER_TARGET)
    set(triple "${CMAKE_${compiler_language}_COMPILER_TARGET}")
  elseif(compiler)
    execute_process(COMMAND "${compiler}" -dumpmachine RESULT_VARIABLE failed
                    OUTPUT_VARIABLE triple ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(failed)
      set(triple "")
    endif()
  endif()
  if(NOT triple AND CMAKE_SYSTEM_PROCESSOR AND CMAKE_SYSTEM_NAME STREQUAL "Linux")
    set(triple "${CMAKE_SYSTEM_PROCESSOR}-linux-gnu")
  endif()
  if(NOT triple)
    message(FATAL_ERROR "buildgen_add_models: a cross build (CMAKE_CROSSCOMPILING), but the "
                        "target triple is unknown: set CMAKE_C_COMPILER_TARGET (or a compiler "
                        "answering -dumpmachine) in the toolchain file, or give the models' "
                        "targets a triple in the manifest")
  endif()
  set(arguments --cross-triple "${triple}")
  # The project's C compiler compiles the models' C; without C enabled, buildgen's own
  # compiles use the triple's gcc (<triple>-gcc).
  if("C" IN_LIST enabled AND CMAKE_C_COMPILER)
    list(APPEND arguments --cross-cc "${CMAKE_C_COMPILER}")
  endif()
  if(CMAKE_SYSROOT)
    list(APPEND arguments --cross-sysroot "${CMAKE_SYSROOT}")
  endif()
  foreach(item IN LISTS CMAKE_CROSSCOMPILING_EMULATOR)
    list(APPEND arguments "--cross-emulator=${item}")
  endforeach()
  set(${out} "${arguments}" PARENT_SCOPE)
endfunction()

# The interpreter that imports this buildgen, cached in BUILDGEN_PYTHON.
function(_buildgen_python out)
  get_property(mine GLOBAL PROPERTY _BUILDGEN_CMAKE_DIR)
  file(REAL_PATH "${mine}" mine)
  if(BUILDGEN_PYTHON AND "${_BUILDGEN_PYTHON_CHECKED}" STREQUAL "${BUILDGEN_PYTHON}|${mine}")
    set(${out} "${BUILDGEN_PYTHON}" PARENT_SCOPE)
    return()
  endif()
  if(BUILDGEN_PYTHON)
    set(candidates "${BUILDGEN_PYTHON}")
  else()
    set(candidates "")
    foreach(variable IN ITEMS Python3_EXECUTABLE Python_EXECUTABLE)
      if(${variable})
        list(APPEND candidates "${${variable}}")
      endif()
    endforeach()
    # <prefix>/lib/pythonX.Y/site-packages/buildgen/cmake -> <prefix>/bin (a venv, /usr).
    cmake_path(SET beside NORMALIZE "${mine}/../../../../../bin")
    foreach(name IN ITEMS python3 python)
      if(EXISTS "${beside}/${name}")
        list(APPEND candidates "${beside}/${name}")
      endif()
      find_program(_BUILDGEN_PROBE_${name} NAMES ${name})
      if(_BUILDGEN_PROBE_${name})
        list(APPEND candidates "${_BUILDGEN_PROBE_${name}}")
      endif()
      unset(_BUILDGEN_PROBE_${name} CACHE)
    endforeach()
    list(REMOVE_DUPLICATES candidates)
  endif()
  # The probe imports what `buildgen cmake` needs (a python that finds buildgen but not its
  # dependencies fails here, not later) and runs outside any source tree: `-c` puts the
  # working directory on sys.path, where a checkout's buildgen/ would be found by accident.
  string(CONCAT probe "import sys, buildgen.cmake.generate\n"
                      "from buildgen.resources import cmake_dir\n"
                      "sys.stdout.write(str(cmake_dir()))")
  foreach(candidate IN LISTS candidates)
    execute_process(COMMAND "${candidate}" -c "${probe}" RESULT_VARIABLE failed
                    WORKING_DIRECTORY "${CMAKE_BINARY_DIR}/CMakeFiles"
                    OUTPUT_VARIABLE theirs ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(NOT failed AND EXISTS "${theirs}")
      file(REAL_PATH "${theirs}" theirs)
      if(theirs STREQUAL mine)
        set(BUILDGEN_PYTHON "${candidate}" CACHE FILEPATH
            "Python interpreter that runs buildgen (the one it is installed for)")
        set(_BUILDGEN_PYTHON_CHECKED "${candidate}|${mine}" CACHE INTERNAL "")
        set(${out} "${candidate}" PARENT_SCOPE)
        return()
      endif()
    endif()
  endforeach()
  if(BUILDGEN_PYTHON)
    message(FATAL_ERROR "BUILDGEN_PYTHON=${BUILDGEN_PYTHON} does not import the buildgen whose "
                        "CMake package is ${mine}")
  endif()
  message(FATAL_ERROR "no Python interpreter found that imports the buildgen whose CMake package "
                      "is ${mine} (tried: ${candidates}); pass -DBUILDGEN_PYTHON=<the python "
                      "buildgen is installed for>")
endfunction()

# The helpers the generated fragment calls (_buildgen_*).
include("${CMAKE_CURRENT_LIST_DIR}/buildgenFragment.cmake")

cmake_policy(POP)
