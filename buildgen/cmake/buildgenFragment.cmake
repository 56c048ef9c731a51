# The helpers a fragment written by `buildgen cmake` calls (buildgen/cmake/emit.py writes
# the calls); buildgenModels.cmake includes this file. Each maps one kind of planned action
# onto CMake: custom commands, object libraries, the static and shared libraries.

include_guard(GLOBAL)
# Functions run with the policies in force where they were defined.
cmake_policy(PUSH)
cmake_policy(VERSION 3.20...3.31)

# --- Helpers the generated fragment calls; paths in their arguments are relative to the
# --- build dir (the fragment's CMAKE_CURRENT_BINARY_DIR) unless absolute.

function(_buildgen_fragment)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "FORMAT;VERSION" "")
  if(NOT arg_FORMAT STREQUAL "2")
    get_property(mine GLOBAL PROPERTY _BUILDGEN_CMAKE_DIR)
    message(FATAL_ERROR "${CMAKE_CURRENT_LIST_FILE} was written by buildgen ${arg_VERSION} in "
                        "fragment format ${arg_FORMAT}; the CMake package at ${mine} reads "
                        "format 2. Use one buildgen for both (BUILDGEN_PYTHON).")
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

# Target names come from models, targets, and for shared kernels their kind and toolchain
# (not the build dir, so that adding a model keeps their target and compiled objects): two
# buildgen_add_models() calls can name one target.
function(_buildgen_check_new name)
  if(TARGET ${name})
    message(FATAL_ERROR "two buildgen_add_models() calls both make the CMake target ${name}: "
                        "the same model and target, or kernels of one kind and toolchain "
                        "(buildgen_shared_*); give those models one manifest and one call, "
                        "so that they share them")
  endif()
endfunction()

# Sources compiled with one set of flags: recorded here, made an OBJECT library by the first
# _buildgen_compile that CMake compiles.
function(_buildgen_objects name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "LIBRARY;LANGUAGE;POOL" "INCLUDES;FLAGS")
  _buildgen_check_new(${name})
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

# Objects compiled once for several libraries (a kind's shared kernels): a STATIC library,
# and the custom target that runs the commands writing its sources (GENERATED) once the
# libraries whose codegen writes their inputs (AFTER, defined later) have run theirs.
# _buildgen_library(KERNELS) then links it into shared libraries and adds its objects
# (recorded here as _buildgen_<static>_objects) to static ones.
function(_buildgen_shared_kernels static)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "GENERATE;OUTPUT_NAME;DIRECTORY" "AFTER;GENERATED")
  _buildgen_check_new(${static})
  set(external ${_buildgen_${static}_external})
  _buildgen_absolute(generated ${arg_GENERATED})
  add_custom_target(${arg_GENERATE} DEPENDS ${generated} ${external})
  if(arg_AFTER)
    add_dependencies(${arg_GENERATE} ${arg_AFTER})
  endif()
  set(objects "")
  set(languages "")
  foreach(group IN LISTS _buildgen_${static}_groups)
    add_dependencies(${group} ${arg_GENERATE})
    list(APPEND objects "$<TARGET_OBJECTS:${group}>")
    list(APPEND languages "${_buildgen_${group}_language}")
  endforeach()
  list(APPEND objects ${external})
  _buildgen_link_language(link_language "${languages}")
  _buildgen_absolute(directory "${arg_DIRECTORY}")
  add_library(${static} STATIC ${objects})
  add_dependencies(${static} ${arg_GENERATE})
  set_target_properties(${static} PROPERTIES OUTPUT_NAME "${arg_OUTPUT_NAME}"
                        ARCHIVE_OUTPUT_DIRECTORY "${directory}"
                        LINKER_LANGUAGE "${link_language}")
  set(_buildgen_${static}_objects "${objects}" PARENT_SCOPE)
  set(_buildgen_${static}_languages "${languages}" PARENT_SCOPE)
endfunction()

# The static and shared libraries of one model and target, and the custom target that runs
# their generation commands (GENERATED) first.
function(_buildgen_library static)
  cmake_parse_arguments(PARSE_ARGV 1 arg ""
                        "SHARED;GENERATE;AFTER;EXPORT_NAME;OUTPUT_NAME;DIRECTORY;HEADER;INCLUDE_DIR"
                        "GENERATED;KERNELS;LINK")
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
  foreach(kernels IN LISTS arg_KERNELS)
    list(APPEND languages ${_buildgen_${kernels}_languages})
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
    # Like build.ninja: a shared library links the shared kernels' archive (the linker takes
    # the members it needs); a static one holds their objects, so that it stands alone and
    # installs without the archive (a link to it would have to be exported too).
    set(kernel_objects "")
    set(kernel_archives "")
    foreach(kernels IN LISTS arg_KERNELS)
      if(kind STREQUAL "STATIC")
        list(APPEND kernel_objects ${_buildgen_${kernels}_objects})
      else()
        list(APPEND kernel_archives ${kernels})
      endif()
    endforeach()
    add_library(${target} ${kind} ${objects} ${external} ${kernel_objects})
    add_dependencies(${target} ${arg_GENERATE} ${arg_KERNELS})
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
    target_link_libraries(${target} PRIVATE ${kernel_archives} ${arg_LINK})
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
