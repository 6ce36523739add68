# Every dependency comes from Debian's packages (scripts/setup.sh installs them), but xgrammar
# (at the end).
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
if(PAGODA_BUILD_TESTS OR NOT DEFINED PAGODA_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
# Beast and Asio are header-only (Boost.System too, since 1.69): the HTTP server needs no Boost
# library binaries.
find_package(Boost 1.74 REQUIRED CONFIG COMPONENTS headers)
find_package(yaml-cpp REQUIRED)
# The gRPC frontend (src/grpc, proto/). ON by default; OFF builds everything else on a machine
# without the gRPC packages.
option(PAGODA_ENABLE_GRPC "Build the gRPC frontend (pagoda serve --grpc-port)" ON)
if(PAGODA_ENABLE_GRPC)
  find_package(Protobuf)
  find_package(gRPC CONFIG QUIET)
  find_program(PAGODA_GRPC_CPP_PLUGIN grpc_cpp_plugin)
  if(NOT Protobuf_FOUND OR NOT Protobuf_PROTOC_EXECUTABLE OR NOT gRPC_FOUND
     OR NOT PAGODA_GRPC_CPP_PLUGIN)
    message(FATAL_ERROR "the gRPC frontend needs gRPC and protobuf: install the Debian packages "
                        "libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc "
                        "(scripts/setup.sh does), or configure with -DPAGODA_ENABLE_GRPC=OFF")
  endif()
endif()
# xgrammar's C++ core (structured outputs, src/structured/): built from its pinned PyPI source
# distribution by scripts/build_xgrammar.sh (run by scripts/setup.sh) into .cache/.
set(PAGODA_XGRAMMAR_ROOT "${CMAKE_SOURCE_DIR}/.cache/xgrammar-0.2.8/install"
    CACHE PATH "Where scripts/build_xgrammar.sh installed xgrammar (lib/, include/)")
find_library(PAGODA_XGRAMMAR_LIBRARY NAMES libxgrammar.a xgrammar
             PATHS "${PAGODA_XGRAMMAR_ROOT}/lib" NO_DEFAULT_PATH)
if(NOT PAGODA_XGRAMMAR_LIBRARY OR NOT EXISTS "${PAGODA_XGRAMMAR_ROOT}/include/xgrammar/xgrammar.h")
  message(FATAL_ERROR "xgrammar is not built in ${PAGODA_XGRAMMAR_ROOT}: run scripts/setup.sh "
                      "(or scripts/build_xgrammar.sh), or set PAGODA_XGRAMMAR_ROOT")
endif()
add_library(pagoda_xgrammar STATIC IMPORTED GLOBAL)
set_target_properties(pagoda_xgrammar PROPERTIES
  IMPORTED_LOCATION "${PAGODA_XGRAMMAR_LIBRARY}"
  INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${PAGODA_XGRAMMAR_ROOT}/include"
  INTERFACE_INCLUDE_DIRECTORIES "${PAGODA_XGRAMMAR_ROOT}/include"
  INTERFACE_COMPILE_DEFINITIONS "XGRAMMAR_ENABLE_CPPTRACE=0;XGRAMMAR_ENABLE_INTERNAL_CHECK=0"
  INTERFACE_LINK_LIBRARIES Threads::Threads)
