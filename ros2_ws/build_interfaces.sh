#!/usr/bin/env bash
# Build ros2_ws/src/timely_interfaces into a Python venv with plain CMake (no colcon,
# no sourcing): the generated Python package then imports from the venv directly.
# Usage: ros2_ws/build_interfaces.sh VENV_DIR
# Skips all work when the interface files have not changed since the last build.
set -euo pipefail

venv=$(cd "${1:?usage: build_interfaces.sh VENV_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
pkg="$here/src/timely_interfaces"
build="$here/build/timely_interfaces"
py="$venv/bin/python"

for tool in cmake make cc c++; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "error: '$tool' is required to build the ROS 2 interfaces but is not installed (Debian: apt-get install cmake build-essential)" >&2
    exit 1
  fi
done

stamp="$venv/.timely_interfaces.stamp"
digest=$(cat "$pkg"/CMakeLists.txt "$pkg"/package.xml "$pkg"/msg/* "$pkg"/action/* "$0" | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$digest" ] \
   && "$py" -c "import timely_interfaces.action" 2>/dev/null; then
  echo "==> ROS 2 interfaces: up to date"
  exit 0
fi

# The ros-* wheels ship CMake exports that name the include directories of the
# Python and numpy they were built with (a manylinux /opt/python/cp3XY tree).
# Point them at this venv's own, or CMake refuses the non-existent paths.
py_inc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
np_inc=$("$py" -c 'import numpy; print(numpy.get_include())')
for f in "$venv"/share/*/cmake/*__rosidl_generator_pyExport.cmake; do
  [ -e "$f" ] || continue
  if grep -q 'INTERFACE_INCLUDE_DIRECTORIES "/opt/python/' "$f"; then
    sed -i -E "s#INTERFACE_INCLUDE_DIRECTORIES \"/opt/python/[^\"]*\"#INTERFACE_INCLUDE_DIRECTORIES \"${py_inc};${np_inc}\"#" "$f"
  fi
done

echo "==> building ROS 2 interfaces (timely_interfaces) into $venv"
log="$build.log"
mkdir -p "$build"
if ! (export CMAKE_PREFIX_PATH="$venv" AMENT_PREFIX_PATH="$venv"
      cmake -S "$pkg" -B "$build" -DCMAKE_INSTALL_PREFIX="$venv" \
        -DPython3_EXECUTABLE="$py" -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=Release \
      && cmake --build "$build" -j2 && cmake --install "$build") >"$log" 2>&1; then
  echo "error: building timely_interfaces failed; last lines of $log:" >&2
  tail -n 25 "$log" >&2
  exit 1
fi
"$py" -c "import timely_interfaces.action, timely_interfaces.msg" \
  || { echo "error: timely_interfaces built but does not import from $venv" >&2; exit 1; }
echo "$digest" >"$stamp"
echo "==> ROS 2 interfaces: built"
