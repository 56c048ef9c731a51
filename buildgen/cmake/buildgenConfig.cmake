# buildgen's CMake package: find_package(buildgen CONFIG) reads this file.
#
# It ships inside the Python package (buildgen/cmake/), so it is found after `pip install`:
#   cmake -DCMAKE_PREFIX_PATH="$(buildgen --cmake-dir)" ...     or
#   cmake -Dbuildgen_DIR="$(buildgen --cmake-dir)" ...
# and by scikit-build-core projects through the `cmake.prefix` entry point.
#
# It provides buildgen_add_models() (buildgenModels.cmake describes it) and sets
# buildgen_CMAKE_DIR to this folder.

if(CMAKE_VERSION VERSION_LESS 3.20)
  set(buildgen_FOUND FALSE)
  set(buildgen_NOT_FOUND_MESSAGE
      "buildgen needs CMake 3.20 or newer (custom-command depfiles under make); this is "
      "CMake ${CMAKE_VERSION}")
  return()
endif()

set(buildgen_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}")
include("${CMAKE_CURRENT_LIST_DIR}/buildgenModels.cmake")
