# Sourced by the GPU scripts. Offline GPU hosts (no package registry): the build dependencies may
# come as Debian packages in $repo/.deps/*.deb (`apt-get download libyaml-cpp-dev libyaml-cpp0.7
# libfmt-dev libfmt9 libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian
# libdlpack-dev libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread libopenblas0
# libgfortran5` on a machine that has one). They are unpacked into a private prefix, never into /,
# and the compiler, CMake and the loader are pointed at it. Needs $repo.
if compgen -G "$repo/.deps/*.deb" > /dev/null; then
  deps="${TMPDIR:-/tmp}/tileops-deps"
  mkdir -p "$deps"
  for f in "$repo"/.deps/*.deb; do dpkg -x "$f" "$deps"; done
  export CMAKE_PREFIX_PATH="$deps/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export CPATH="$deps/usr/include${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "build dependencies from .deps/ unpacked into $deps"
fi
