# Warnings for our own code: -Wall -Wextra (and -Werror unless TILEOPS_WERROR is off).
function(tileops_warnings target)
  set(flags -Wall -Wextra -Wpedantic -Wno-missing-field-initializers)
  if(TILEOPS_WERROR)
    list(APPEND flags -Werror)
  endif()
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${flags}>)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra --expt-relaxed-constexpr>)
endfunction()
