# The installed package: headers, liblanes.so and liblanes.a, find_package(lanes)
# (lanes::lanes, lanes::lanes_static) and pkg-config (lanes.pc). README.md,
# "Install and link"; tests/install/check_install.sh checks both ways.
include(CMakePackageConfigHelpers)
install(TARGETS lanes lanes_static EXPORT lanesTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/lanes DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT lanesTargets NAMESPACE lanes:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/lanes)
configure_package_config_file(cmake/lanesConfig.cmake.in
  ${CMAKE_BINARY_DIR}/lanesConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/lanes)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/lanesConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/lanesConfig.cmake ${CMAKE_BINARY_DIR}/lanesConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/lanes)

# lanes.pc finds the prefix from its own place (pkg-config's ${pcfiledir}), so
# `cmake --install --prefix` anywhere needs no reconfigure: the way up from
# <libdir>/pkgconfig is ../.. for lib, ../../.. for lib/x86_64-linux-gnu. An
# absolute CMAKE_INSTALL_LIBDIR or INCLUDEDIR stays as given.
file(RELATIVE_PATH lanes_pc_up "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" lanes_pc_up "${lanes_pc_up}")
set(lanes_pc_prefix "\${pcfiledir}/${lanes_pc_up}")
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(lanes_pc_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(lanes_pc_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
# What a static link against liblanes.a needs besides it (Libs.private): the C++
# runtime, hwloc where it was found, the CUDA runtime where the CUDA data path
# is built (linked statically, as into liblanes.so), threads, rt, dl.
set(lanes_pc_private "-lstdc++ -lm")
if(HWLOC_FOUND)
  string(APPEND lanes_pc_private " -lhwloc")
endif()
if(LANES_WITH_CUDA)
  string(APPEND lanes_pc_private " -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static")
endif()
string(APPEND lanes_pc_private " -lpthread -lrt -ldl")
configure_file(cmake/lanes.pc.in ${CMAKE_BINARY_DIR}/lanes.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/lanes.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
