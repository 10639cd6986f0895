# SPDX-License-Identifier: Apache-2.0
# Packages: one build, one command (`make package`, or `cpack` in the build
# directory) writes packages/fabric-agent_<version>-<release>_amd64.deb and
# packages/fabric-agent-<version>-<release>.x86_64.rpm. See docs/packaging.md.
#
# Layout (both packages):
#   /usr/bin/fabric-agent                      the one executable; stripped, debug symbols kept out
#   /usr/lib/systemd/system/fabric-agent.service   relative install path, so not %config
#   /etc/fabric-agent/agent.yaml               conffile / %config(noreplace)
#   /etc/fabric-agent/agent.yaml.d/            0755, empty: drop-ins (*.yaml) laid over agent.yaml
#   /var/lib/fabric-agent/                     0700: token, persisted state
#   /usr/bin/fabric-agent-runtime              OCI runtime for nested containers (static PIE)
#   /usr/share/man/man8/fabric-agent.8.gz      (and fabric-agent-runtime.8.gz, a link to it)
#   /usr/share/doc/fabric-agent/               docs; Debian: copyright, changelog.Debian.gz
#   /usr/share/licenses/fabric-agent/          RPM only: LICENSE, copyright (what is compiled in)
#   /usr/share/lintian/overrides/fabric-agent  Debian only
# Install components split what only one format carries: "deb" and "rpm";
# CPackProjectConfig.cmake picks the set per generator (monolithic packages).

set(FA_PKG_SRC ${PROJECT_SOURCE_DIR}/packaging)
set(FA_PKG_BIN ${PROJECT_BINARY_DIR}/packaging)
set(FA_PKG_CONTACT "fabric-agent maintainers <maintainers@users.noreply.a-seed-fc2b164e.example>")

# --- generated files: maintainer scripts, compressed man page and changelogs ---

# The token snippet is pasted into the Debian postinst and the RPM %post so
# both create the token the same way.
file(READ ${FA_PKG_SRC}/create-token.sh FA_CREATE_TOKEN)
configure_file(${FA_PKG_SRC}/deb/postinst.in ${FA_PKG_BIN}/deb/postinst @ONLY)
configure_file(${FA_PKG_SRC}/deb/prerm ${FA_PKG_BIN}/deb/prerm COPYONLY)
configure_file(${FA_PKG_SRC}/deb/postrm ${FA_PKG_BIN}/deb/postrm COPYONLY)
configure_file(${FA_PKG_SRC}/deb/conffiles ${FA_PKG_BIN}/deb/conffiles COPYONLY)
configure_file(${FA_PKG_SRC}/rpm/post.sh.in ${FA_PKG_BIN}/rpm/post.sh @ONLY)

# packaging/changelog (Debian format) is the one changelog; the RPM %changelog
# is derived from it here, entry by entry:
#   fabric-agent (V) dist; urgency=u / text lines / -- NAME <MAIL>  Ddd, DD Mon YYYY HH:MM:SS +ZZZZ
#   ->  * Ddd Mon DD YYYY NAME <MAIL> - V / - text lines
file(STRINGS ${FA_PKG_SRC}/changelog FA_CHANGELOG_LINES)
set(FA_RPM_CHANGELOG "")
set(FA_ENTRY_VERSION "")
set(FA_ENTRY_BODY "")
foreach(line IN LISTS FA_CHANGELOG_LINES)
  if(line MATCHES "^fabric-agent \\(([^)]+)\\)")
    set(FA_ENTRY_VERSION "${CMAKE_MATCH_1}")
    set(FA_ENTRY_BODY "")
  elseif(line MATCHES "^ -- (.+)  ([A-Z][a-z][a-z]), ([0-9]+) ([A-Z][a-z][a-z]) ([0-9]+) ")
    string(APPEND FA_RPM_CHANGELOG
           "* ${CMAKE_MATCH_2} ${CMAKE_MATCH_4} ${CMAKE_MATCH_3} ${CMAKE_MATCH_5} ${CMAKE_MATCH_1} - ${FA_ENTRY_VERSION}\n${FA_ENTRY_BODY}\n")
  elseif(line MATCHES "^  \\* (.*)$")
    string(APPEND FA_ENTRY_BODY "- ${CMAKE_MATCH_1}\n")
  elseif(line MATCHES "^    (.*)$")
    string(APPEND FA_ENTRY_BODY "  ${CMAKE_MATCH_1}\n")
  endif()
endforeach()
file(WRITE ${FA_PKG_BIN}/rpm/changelog "${FA_RPM_CHANGELOG}")

# gzip -n: no name or timestamp in the header, so the files are reproducible.
add_custom_command(
  OUTPUT ${FA_PKG_BIN}/fabric-agent.8.gz
  COMMAND gzip -9n -c ${FA_PKG_SRC}/fabric-agent.8 > ${FA_PKG_BIN}/fabric-agent.8.gz
  DEPENDS ${FA_PKG_SRC}/fabric-agent.8
  COMMENT "man page fabric-agent.8.gz")
add_custom_command(
  OUTPUT ${FA_PKG_BIN}/changelog.Debian.gz
  COMMAND gzip -9n -c ${FA_PKG_SRC}/changelog > ${FA_PKG_BIN}/changelog.Debian.gz
  DEPENDS ${FA_PKG_SRC}/changelog
  COMMENT "changelog.Debian.gz")
add_custom_target(fa_package_files ALL
  DEPENDS ${FA_PKG_BIN}/fabric-agent.8.gz ${FA_PKG_BIN}/changelog.Debian.gz)

# --- install rules (the binary's own rule is in agent/CMakeLists.txt) ---

# Relative destinations land under CPACK_PACKAGING_INSTALL_PREFIX (/usr);
# /etc and /var are absolute. CPackRPM marks absolute-destination files as
# plain %config, which CPACK_RPM_USER_FILELIST below turns into
# %config(noreplace); the unit stays relative so it is never a config file.
if(EXISTS ${PROJECT_SOURCE_DIR}/systemd/fabric-agent.service)
  install(FILES ${PROJECT_SOURCE_DIR}/systemd/fabric-agent.service DESTINATION lib/systemd/system)
else()
  message(WARNING "systemd/fabric-agent.service is missing: the packages will not carry the unit")
endif()
install(FILES ${FA_PKG_SRC}/agent.yaml DESTINATION /etc/fabric-agent
        PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
# Drop-ins: fleet tools add settings here without editing the conffile.
install(DIRECTORY DESTINATION /etc/fabric-agent/agent.yaml.d
        DIRECTORY_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
install(DIRECTORY DESTINATION /var/lib/fabric-agent
        DIRECTORY_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
install(FILES ${FA_PKG_BIN}/fabric-agent.8.gz DESTINATION share/man/man8)
# fabric-agent-runtime is described in fabric-agent(8) (FILES): its page is a
# link to that one.
file(CREATE_LINK fabric-agent.8.gz ${FA_PKG_BIN}/fabric-agent-runtime.8.gz SYMBOLIC)
install(FILES ${FA_PKG_BIN}/fabric-agent-runtime.8.gz DESTINATION share/man/man8)
file(GLOB FA_DOCS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${FA_DOCS} DESTINATION share/doc/fabric-agent)
install(FILES ${FA_PKG_SRC}/deb/copyright ${FA_PKG_BIN}/changelog.Debian.gz
        DESTINATION share/doc/fabric-agent COMPONENT deb)
install(FILES ${FA_PKG_SRC}/deb/lintian-overrides DESTINATION share/lintian/overrides
        RENAME fabric-agent COMPONENT deb)
# The Debian copyright file carries the licenses of what is compiled in (yaml-cpp, OpenSSL).
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${FA_PKG_SRC}/deb/copyright DESTINATION share/licenses/fabric-agent
        COMPONENT rpm)

# --- CPack ---

set(CPACK_GENERATOR "DEB;RPM")
set(CPACK_PACKAGE_NAME fabric-agent)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "fabric-agent")
set(CPACK_PACKAGE_CONTACT "${FA_PKG_CONTACT}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "GPU cluster host agent: RDMA fabric discovery, WireGuard overlay, API")
set(CPACK_PACKAGE_DESCRIPTION
    "fabric-agent runs on every machine a GPU provider rents out through a
marketplace. It discovers the machine's RDMA HCAs, ports, GIDs and GPUs,
names the fabric the machine is on (InfiniBand subnet or RoCE segment),
chooses and explains the NCCL variables a job must use, stands up the
cluster's WireGuard overlay, measures RDMA links between machines, and
serves an authenticated HTTP API to the marketplace's control plane.")
# The RPM's %description: the same text, then what the package installs.
set(CPACK_RPM_PACKAGE_DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION}

It hands /dev/infiniband and the NCCL environment to whole-machine
containers through a CDI spec and an OCI hook, and keeps the overlay up
across its own restarts and upgrades.

The package installs the fabric-agent executable, the systemd unit
fabric-agent.service (Type=notify, watchdog), the configuration
/etc/fabric-agent/agent.yaml with every key and its default, the state
directory /var/lib/fabric-agent (the API token is created on install),
a man page and the operator documentation. WireGuard runs in the kernel
where it has the module, else through wireguard-go.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
# Debug symbols are kept out: the packaged binary is stripped; the unstripped
# build tree binary (same build id) is what a debugger loads.
set(CPACK_STRIP_FILES ON)
set(CPACK_PROJECT_CONFIG_FILE ${FA_PKG_BIN}/CPackProjectConfig.cmake)
configure_file(${FA_PKG_SRC}/CPackProjectConfig.cmake.in ${FA_PKG_BIN}/CPackProjectConfig.cmake @ONLY)

# Debian. The release is the package revision; `make package PACKAGE_RELEASE=N`
# (cpack -D CPACK_DEBIAN_PACKAGE_RELEASE=N) builds a higher one.
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Depends: dpkg-shlibdeps from the binary's NEEDED libraries.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Verbs provider drivers (mlx5, rxe, ...) are plugins libibverbs loads at run
# time; wireguard-go is the backend where the kernel has no WireGuard.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "ibverbs-providers, wireguard-go")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "wireguard-tools, rdma-core")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${FA_PKG_BIN}/deb/conffiles ${FA_PKG_BIN}/deb/postinst ${FA_PKG_BIN}/deb/prerm ${FA_PKG_BIN}/deb/postrm)
# 0755 scripts, 0644 conffiles, as dpkg-deb and lintian expect.
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

# RPM. Built with the rpm tools Debian ships (docs/packaging.md).
set(CPACK_RPM_PACKAGE_RELEASE 1)
# Not relocatable: /etc and /var paths are fixed, and so is the unit.
set(CPACK_PACKAGE_RELOCATABLE OFF)
set(CPACK_RPM_PACKAGE_RELOCATABLE OFF)
set(CPACK_RPM_FILE_NAME RPM-DEFAULT)
set(CPACK_RPM_PACKAGE_LICENSE "Apache-2.0")
set(CPACK_RPM_PACKAGE_GROUP "System Environment/Daemons")
set(CPACK_RPM_PACKAGE_SUMMARY "${CPACK_PACKAGE_DESCRIPTION_SUMMARY}")
# Requires: rpmbuild's find-requires from the binary's NEEDED libraries.
# CPack has no Recommends: the same weak dependencies as Suggests.
set(CPACK_RPM_PACKAGE_SUGGESTS "rdma-core, wireguard-go, wireguard-tools")

set(CPACK_RPM_CHANGELOG_FILE ${FA_PKG_BIN}/rpm/changelog)
set(CPACK_RPM_POST_INSTALL_SCRIPT_FILE ${FA_PKG_BIN}/rpm/post.sh)
set(CPACK_RPM_PRE_UNINSTALL_SCRIPT_FILE ${FA_PKG_SRC}/rpm/preun.sh)
set(CPACK_RPM_POST_UNINSTALL_SCRIPT_FILE ${FA_PKG_SRC}/rpm/postun.sh)
set(CPACK_RPM_USER_FILELIST
    "%config(noreplace) /etc/fabric-agent/agent.yaml"
    "%dir %attr(0755,root,root) /etc/fabric-agent/agent.yaml.d"
    "%dir %attr(0700,root,root) /var/lib/fabric-agent"
    "%license /usr/share/licenses/fabric-agent/LICENSE"
    "%license /usr/share/licenses/fabric-agent/copyright")
# Directories that belong to the distribution (filesystem, systemd, man-db)
# and must not be owned by this package.
set(CPACK_RPM_EXCLUDE_FROM_AUTO_FILELIST_ADDITION
    /usr/lib/systemd /usr/lib/systemd/system /usr/share/man /usr/share/man/man8
    /usr/share/licenses /var /var/lib)

include(CPack)
