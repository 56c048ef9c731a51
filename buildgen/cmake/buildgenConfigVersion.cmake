# find_package(buildgen <version> CONFIG): is this buildgen the version asked for?
#
# The version is read from the Python package this folder belongs to (buildgen/__init__.py),
# so the CMake package and the Python code can never disagree. Compatible means: not older
# than asked, and the same major version (for 0.x, the same minor: 0.x releases may break).

file(STRINGS "${CMAKE_CURRENT_LIST_DIR}/../__init__.py" _buildgen_version_line
     REGEX "^__version__ *= *\"[^\"]+\"")
string(REGEX REPLACE "^__version__ *= *\"([^\"]+)\".*" "\\1" PACKAGE_VERSION
       "${_buildgen_version_line}")
unset(_buildgen_version_line)

if(NOT PACKAGE_VERSION)
  set(PACKAGE_VERSION_UNSUITABLE TRUE)
  set(PACKAGE_VERSION "unknown")
  return()
endif()

set(PACKAGE_VERSION_COMPATIBLE FALSE)
if(NOT PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  string(REGEX MATCH "^([0-9]+)\\.([0-9]+)" _buildgen_have "${PACKAGE_VERSION}")
  set(_buildgen_have_major "${CMAKE_MATCH_1}")
  set(_buildgen_have_minor "${CMAKE_MATCH_2}")
  if(PACKAGE_FIND_VERSION_MAJOR EQUAL _buildgen_have_major
     AND (NOT _buildgen_have_major EQUAL 0 OR PACKAGE_FIND_VERSION_COUNT LESS 2
          OR PACKAGE_FIND_VERSION_MINOR EQUAL _buildgen_have_minor))
    set(PACKAGE_VERSION_COMPATIBLE TRUE)
  endif()
  unset(_buildgen_have)
  unset(_buildgen_have_major)
  unset(_buildgen_have_minor)
endif()
if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
  set(PACKAGE_VERSION_EXACT TRUE)
endif()
