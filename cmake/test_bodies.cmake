# lanes_test_bodies_at_o1(TARGET): the target's test bodies (test_*.cc) compile
# at -O1 outside Debug builds. They drive the library and the shared test
# helpers (harness.cc, data.cc, ...), which keep the build's optimization;
# optimizing their expanded assertions cost a third of each test file's
# compile time (-O3 against -O1) and a large share of a cold `make test`.
function(lanes_test_bodies_at_o1 target)
  get_target_property(sources ${target} SOURCES)
  foreach(source ${sources})
    get_filename_component(name "${source}" NAME)
    if(name MATCHES "^test_.*\\.cc$")
      set_property(SOURCE "${source}" TARGET_DIRECTORY ${target} APPEND PROPERTY
        COMPILE_OPTIONS $<$<NOT:$<CONFIG:Debug>>:-O1>)
    endif()
  endforeach()
endfunction()
