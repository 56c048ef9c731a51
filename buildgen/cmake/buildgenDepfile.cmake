# cmake -D DEPFILE=<depfile> -D DEPENDENCY=<file> -P buildgenDepfile.cmake
#
# Gives a depfile that names no dependency one: DEPENDENCY, which the action already depends
# on, so nothing changes but the file's emptiness. Why: CMake 3.25 (Debian 12's) hands a
# custom command's transformed depfile to ninja without `deps = gcc`, its transformed copy of
# `out: ` is empty, and ninja reads an empty depfile as a missing one: the action would run
# on every build. CMake 4 passes `deps = gcc` and needs none of this; versions in between are
# treated like 3.25 (the cost is one `cmake -P` per action with a depfile). buildgen's stages
# write such depfiles when they read no file beyond their declared inputs.

file(READ "${DEPFILE}" text)
string(REGEX REPLACE "\\\\\r?\n" " " joined "${text}")  # continuation lines
if(joined MATCHES "^[^:]*:[ \t\r\n]*$")
  string(REGEX REPLACE "[ \t\r\n]+$" "" text "${text}")
  file(WRITE "${DEPFILE}" "${text} ${DEPENDENCY}\n")
endif()
