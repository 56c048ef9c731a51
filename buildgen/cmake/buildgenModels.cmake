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
# add_subdirectory(), its binary dir being BUILD_DIR. The fragment calls the helpers below:
# one add_custom_command per buildgen action (import, partition, codegen, executor, report),
# the generated sources compiled by CMake itself, libraries linked by CMake. The manifest,
# buildgen's rules and schemas are CMAKE_CONFIGURE_DEPENDS, so editing the manifest re-runs
# configure, and with it the fragment generation, inside the next `cmake --build`.
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

# --- Helpers the generated fragment calls; paths in their arguments are relative to the
# --- build dir (the fragment's CMAKE_CURRENT_BINARY_DIR) unless absolute.

function(_buildgen_fragment)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "FORMAT;VERSION" "")
  if(NOT arg_FORMAT STREQUAL "1")
    get_property(mine GLOBAL PROPERTY _BUILDGEN_CMAKE_DIR)
    message(FATAL_ERROR "${CMAKE_CURRENT_LIST_FILE} was written by buildgen ${arg_VERSION} in "
                        "fragment format ${arg_FORMAT}; the CMake package at ${mine} reads "
                        "format 1. Use one buildgen for both (BUILDGEN_PYTHON).")
  endif()
endfunction()

function(_buildgen_absolute out)
  set(result "")
  foreach(path IN LISTS ARGN)
    cmake_path(ABSOLUTE_PATH path BASE_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}" NORMALIZE)
    list(APPEND result "${path}")
  endforeach()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

# Files whose change re-runs configure, and with it `buildgen cmake`, inside the next build.
function(_buildgen_configure_depends)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "" "PATHS")
  _buildgen_absolute(paths ${arg_PATHS})
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${paths})
endfunction()

# A Ninja job pool (nvcc's); the first depth declared wins, as pools are global.
function(_buildgen_pool name depth)
  get_property(pools GLOBAL PROPERTY JOB_POOLS)
  foreach(pool IN LISTS pools)
    if(pool MATCHES "^${name}=")
      return()
    endif()
  endforeach()
  set_property(GLOBAL APPEND PROPERTY JOB_POOLS "${name}=${depth}")
endfunction()

# add_custom_command from the variables <prefix>_OUTPUTS, _DEPENDS, _COMMAND, _COMMENT,
# _DEPFILE, _POOL and _COMMAND_FILE of the caller.
function(_buildgen_add_command prefix)
  _buildgen_absolute(outputs ${${prefix}_OUTPUTS})
  _buildgen_absolute(depends ${${prefix}_DEPENDS} ${${prefix}_COMMAND_FILE})
  set(options "")
  set(after "")
  if(${prefix}_DEPFILE AND CMAKE_GENERATOR MATCHES "Ninja|Makefiles")
    list(APPEND options DEPFILE "${${prefix}_DEPFILE}")
    if(CMAKE_GENERATOR MATCHES "Ninja" AND CMAKE_VERSION VERSION_LESS 4.0)
      get_property(package GLOBAL PROPERTY _BUILDGEN_CMAKE_DIR)
      set(after COMMAND "${CMAKE_COMMAND}" -D "DEPFILE=${${prefix}_DEPFILE}"
                -D "DEPENDENCY=${${prefix}_COMMAND_FILE}" -P "${package}/buildgenDepfile.cmake")
    endif()
  endif()
  if(${prefix}_POOL AND CMAKE_GENERATOR MATCHES "Ninja")
    list(APPEND options JOB_POOL "${${prefix}_POOL}")
  endif()
  set(before "")
  if(NOT CMAKE_GENERATOR MATCHES "Ninja")
    # ninja makes the folders of an action's outputs; make does not.
    set(folders "")
    foreach(output IN LISTS outputs)
      cmake_path(GET output PARENT_PATH folder)
      list(APPEND folders "${folder}")
    endforeach()
    list(REMOVE_DUPLICATES folders)
    set(before COMMAND "${CMAKE_COMMAND}" -E make_directory ${folders})
    # buildgen's actions leave an output untouched when its bytes did not change (ninja's
    # restat then stops the rebuild there). make has no restat: an output older than its
    # inputs would re-run its action on every build, so it is touched.
    list(APPEND after COMMAND "${CMAKE_COMMAND}" -E touch_nocreate ${outputs})
  endif()
  add_custom_command(OUTPUT ${outputs}
                     ${before}
                     COMMAND ${${prefix}_COMMAND} ${after}
                     DEPENDS ${depends}
                     WORKING_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}"
                     COMMENT "${${prefix}_COMMENT}"
                     ${options}
                     VERBATIM)
endfunction()

function(_buildgen_action)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "DEPFILE;POOL;COMMAND_FILE;COMMENT"
                        "OUTPUTS;DEPENDS;COMMAND")
  _buildgen_add_command(arg)
endfunction()

# A custom target driving commands shared by several libraries (a model's import), so that
# make never runs one command from two targets at once.
function(_buildgen_group name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "OUTPUTS")
  _buildgen_absolute(outputs ${arg_OUTPUTS})
  add_custom_target(${name} DEPENDS ${outputs})
endfunction()

# Sources compiled with one set of flags: recorded here, made an OBJECT library by the first
# _buildgen_compile that CMake compiles.
function(_buildgen_objects name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "LIBRARY;LANGUAGE;POOL" "INCLUDES;FLAGS")
  set(_buildgen_${name}_library "${arg_LIBRARY}" PARENT_SCOPE)
  set(_buildgen_${name}_language "${arg_LANGUAGE}" PARENT_SCOPE)
  set(_buildgen_${name}_pool "${arg_POOL}" PARENT_SCOPE)
  set(_buildgen_${name}_includes "${arg_INCLUDES}" PARENT_SCOPE)
  set(_buildgen_${name}_flags "${arg_FLAGS}" PARENT_SCOPE)
endfunction()

# One compile: CMake compiles SOURCE when the project has enabled its language (then it is in
# compile_commands.json and gets the project's compiler launcher); otherwise the plan's own
# command (COMMAND) makes the object, which the libraries take as an external object.
function(_buildgen_compile group)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "SOURCE;DEPFILE;POOL;COMMAND_FILE;COMMENT"
                        "OUTPUTS;DEPENDS;COMMAND")
  set(library "${_buildgen_${group}_library}")
  set(language "${_buildgen_${group}_language}")
  get_property(enabled GLOBAL PROPERTY ENABLED_LANGUAGES)
  if(NOT language OR NOT language IN_LIST enabled)
    _buildgen_add_command(arg)
    _buildgen_absolute(object ${arg_OUTPUTS})
    set(_buildgen_${library}_external ${_buildgen_${library}_external} ${object} PARENT_SCOPE)
    return()
  endif()
  if(NOT TARGET ${group})
    add_library(${group} OBJECT)
    _buildgen_absolute(includes ${_buildgen_${group}_includes})
    target_include_directories(${group} PRIVATE ${includes})
    # One SHELL: option keeps the flags together and in order: CMake de-duplicates
    # options, which would break pairs such as `-idirafter a -idirafter b`.
    set(shell "SHELL:")
    foreach(flag IN LISTS _buildgen_${group}_flags)
      string(REPLACE "\\" "\\\\" flag "${flag}")
      string(REPLACE "\"" "\\\"" flag "${flag}")
      string(APPEND shell " \"${flag}\"")
    endforeach()
    target_compile_options(${group} PRIVATE "${shell}")
    # The flags choose the architecture (nvcc -arch); CMake must not add its own.
    set_target_properties(${group} PROPERTIES POSITION_INDEPENDENT_CODE ON
                                              CUDA_ARCHITECTURES OFF)
    if(_buildgen_${group}_pool AND CMAKE_GENERATOR MATCHES "Ninja")
      set_target_properties(${group} PROPERTIES JOB_POOL_COMPILE "${_buildgen_${group}_pool}")
    endif()
    set(_buildgen_${library}_groups ${_buildgen_${library}_groups} ${group} PARENT_SCOPE)
  endif()
  _buildgen_absolute(source "${arg_SOURCE}")
  target_sources(${group} PRIVATE "${source}")
endfunction()

# The static and shared libraries of one model and target, and the custom target that runs
# their generation commands (GENERATED) first.
function(_buildgen_library static)
  cmake_parse_arguments(PARSE_ARGV 1 arg ""
                        "SHARED;GENERATE;AFTER;EXPORT_NAME;OUTPUT_NAME;DIRECTORY;HEADER;INCLUDE_DIR"
                        "GENERATED;LINK")
  set(external ${_buildgen_${static}_external})
  _buildgen_absolute(generated ${arg_GENERATED})
  add_custom_target(${arg_GENERATE} DEPENDS ${generated} ${external})
  add_dependencies(${arg_GENERATE} ${arg_AFTER})
  set(objects "")
  set(languages "")
  foreach(group IN LISTS _buildgen_${static}_groups)
    add_dependencies(${group} ${arg_GENERATE})
    list(APPEND objects "$<TARGET_OBJECTS:${group}>")
    list(APPEND languages "${_buildgen_${group}_language}")
  endforeach()
  _buildgen_link_language(link_language "${languages}")
  _buildgen_absolute(directory "${arg_DIRECTORY}")
  _buildgen_absolute(header "${arg_HEADER}")
  _buildgen_absolute(include_dir "${arg_INCLUDE_DIR}")
  foreach(kind IN ITEMS STATIC SHARED)
    if(kind STREQUAL "STATIC")
      set(target "${static}")
      set(export "${arg_EXPORT_NAME}")
    else()
      set(target "${arg_SHARED}")
      set(export "${arg_EXPORT_NAME}_shared")
    endif()
    add_library(${target} ${kind} ${objects} ${external})
    add_dependencies(${target} ${arg_GENERATE})
    set_target_properties(${target} PROPERTIES
                          OUTPUT_NAME "${arg_OUTPUT_NAME}"
                          ARCHIVE_OUTPUT_DIRECTORY "${directory}"
                          LIBRARY_OUTPUT_DIRECTORY "${directory}"
                          RUNTIME_OUTPUT_DIRECTORY "${directory}"
                          LINKER_LANGUAGE "${link_language}"
                          PUBLIC_HEADER "${header}"
                          EXPORT_NAME "${export}")
    target_include_directories(${target} INTERFACE "$<BUILD_INTERFACE:${include_dir}>")
    # PRIVATE: a shared library links them itself; a static one hands them to whatever links
    # it ($<LINK_ONLY:...>), after its own objects.
    target_link_libraries(${target} PRIVATE ${arg_LINK})
    add_library(buildgen::${export} ALIAS ${target})
  endforeach()
endfunction()

# The language that links a library: C++ when CMake compiled C++ or CUDA objects for it,
# else C, else whichever of the two the project enabled.
function(_buildgen_link_language out languages)
  get_property(enabled GLOBAL PROPERTY ENABLED_LANGUAGES)
  set(order C CXX)
  if("CXX" IN_LIST languages OR "CUDA" IN_LIST languages)
    set(order CXX C)
  endif()
  foreach(language IN LISTS order)
    if(language IN_LIST enabled)
      set(${out} "${language}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  message(FATAL_ERROR "buildgen_add_models needs the C or CXX language enabled to link "
                      "(project(... LANGUAGES C CXX))")
endfunction()

cmake_policy(POP)
