"""CMake integration: the CMake package shipped inside buildgen, and the fragment emitter.

Package files (data, found through `buildgen --cmake-dir`):
    buildgenConfig.cmake         find_package(buildgen CONFIG) entry point
    buildgenConfigVersion.cmake  version check against buildgen/__init__.py
    buildgenModels.cmake         buildgen_add_models()
    buildgenFragment.cmake       the helpers a fragment calls

Python (`buildgen cmake`, run by buildgen_add_models() at configure time):
    generate.py  manifest -> option files + fragment (the same BuildPlan as build.ninja)
    fragment.py  BuildPlan -> CMake-level description (commands, object groups, libraries)
    emit.py      that description -> the fragment's CMakeLists.txt text
    writer.py    CMake quoting, nothing else
"""
