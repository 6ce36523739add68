# Every dependency comes from Debian's packages (scripts/setup.sh installs them).
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
