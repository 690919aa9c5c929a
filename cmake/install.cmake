# find_package(lanes) -> lanes::lanes, and a pkg-config file.
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
configure_file(cmake/lanes.pc.in ${CMAKE_BINARY_DIR}/lanes.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/lanes.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
