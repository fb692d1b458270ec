# Installs headers, the library, the `tileops` command and a CMake package:
#   find_package(tileops) + target_link_libraries(app PRIVATE tileops::tileops).
# Checked by scripts/install-test.sh (tests/install is the consumer project).
include(CMakePackageConfigHelpers)

# Installed binaries find the installed library next to them ($ORIGIN/../lib) and keep the
# directories of what they link outside the build tree (the CUDA runtime in /usr/local/cuda).
set_target_properties(tileops PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
# Versioned names, except in a wheel (scikit-build-core sets SKBUILD): a wheel holds no symlinks,
# so the two version links would be two more copies of the library.
if(NOT SKBUILD)
  set_target_properties(tileops PROPERTIES
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
endif()
if(TARGET tileops_cli)
  set_target_properties(tileops_cli PROPERTIES
    INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}"
    INSTALL_RPATH_USE_LINK_PATH TRUE)
endif()

install(TARGETS tileops EXPORT tileopsTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/tileops DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The headers tileops-gen writes (tileops/gen/<family>.h), which the op headers include.
install(DIRECTORY ${TILEOPS_GENERATED_INCLUDE_DIR}/tileops DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  OPTIONAL FILES_MATCHING PATTERN "*.h")
install(EXPORT tileopsTargets NAMESPACE tileops:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tileops)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tileopsConfig.cmake.in
  ${PROJECT_BINARY_DIR}/tileopsConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tileops)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tileopsConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tileopsConfig.cmake ${PROJECT_BINARY_DIR}/tileopsConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tileops)
