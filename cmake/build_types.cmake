# Build types beyond CMake's own: Asan (AddressSanitizer + UndefinedBehaviorSanitizer) and Tsan.
#   cmake -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Asan
#   cmake -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Tsan
set(_pagoda_san_asan "-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined")
set(_pagoda_san_tsan "-fsanitize=thread -fno-omit-frame-pointer")

set(CMAKE_CXX_FLAGS_ASAN "-O1 -g ${_pagoda_san_asan}" CACHE STRING "" FORCE)
set(CMAKE_C_FLAGS_ASAN "-O1 -g ${_pagoda_san_asan}" CACHE STRING "" FORCE)
set(CMAKE_EXE_LINKER_FLAGS_ASAN "${_pagoda_san_asan}" CACHE STRING "" FORCE)
set(CMAKE_SHARED_LINKER_FLAGS_ASAN "${_pagoda_san_asan}" CACHE STRING "" FORCE)

set(CMAKE_CXX_FLAGS_TSAN "-O1 -g ${_pagoda_san_tsan}" CACHE STRING "" FORCE)
set(CMAKE_C_FLAGS_TSAN "-O1 -g ${_pagoda_san_tsan}" CACHE STRING "" FORCE)
set(CMAKE_EXE_LINKER_FLAGS_TSAN "${_pagoda_san_tsan}" CACHE STRING "" FORCE)
set(CMAKE_SHARED_LINKER_FLAGS_TSAN "${_pagoda_san_tsan}" CACHE STRING "" FORCE)

set(_pagoda_build_types Release Debug RelWithDebInfo Asan Tsan)
if(CMAKE_BUILD_TYPE AND NOT CMAKE_BUILD_TYPE IN_LIST _pagoda_build_types)
  message(FATAL_ERROR "Unknown CMAKE_BUILD_TYPE '${CMAKE_BUILD_TYPE}'; use one of ${_pagoda_build_types}")
endif()
