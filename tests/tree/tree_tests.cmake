# The tree's own tests: the layering rule of docs/ARCHITECTURE.md over the
# sources, and the checker's proof that it catches each kind of break.
# (tests/CMakeLists.txt adds Tree.LibstdcxxAheadOfLibTorch where LibTorch is.)
find_package(Python3 COMPONENTS Interpreter REQUIRED)
add_test(NAME Tree.Layering
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/check_layers.py ${PROJECT_SOURCE_DIR})
add_test(NAME Tree.LayeringCheckerCatchesBreaks
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/check_layers.py --self-test)
set_tests_properties(Tree.Layering Tree.LayeringCheckerCatchesBreaks PROPERTIES LABELS unit)
