# device_env.sh: the shared start of a device call script (bench/results/*/call*.sh), sourced on the device
# machine from the repository root:
#   . bench/cuda/device_env.sh NAME CARRIED
# NAME: the call's logs go to /tmp/NAME, packed into $OUT/NAME.tgz when the script exits (the device tool returns
# at most 8 files from $OUT); OUT is pointed at /tmp/NAME, REAL keeps the tool's folder.
# CARRIED: the carried folder (ignored by git) holding debs/ (Debian runtime libraries: unpacked into CARRIED/root
# and put on LD_LIBRARY_PATH with CUDA's and CUPTI's), bins.tar.xz (binaries built here, unpacked into /tmp/b) and
# the real headers NAME.hdr.xz (dev_file).
# Gives: el MSG (seconds since the start), dev_file H [ARGS] (the synthetic /tmp/H.gguf from CARRIED/H.hdr.xz,
# ARGS to make_synthetic_dense.py), dev_ktrace (/tmp/libktrace.so, bench/cuda/ktrace.c built against CUPTI).
# REQUIRE_GPU=NAME (e.g. H200): stop at once, exit 3, on another card (a fresh start may bring an H100 for an H200)
if [ -n "${REQUIRE_GPU:-}" ] && ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q "$REQUIRE_GPU"; then
    echo "not a $REQUIRE_GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader)"; exit 3; fi
DEV_NAME=$1 DEV_CARRIED=$2
REAL=$OUT
export OUT=/tmp/$DEV_NAME
mkdir -p "$OUT" /tmp/b
dev_pack() { tar -C /tmp -czf "$REAL/$DEV_NAME.tgz" "$DEV_NAME"; }
trap dev_pack EXIT
DEV_T0=$(date +%s)
el() { echo "[$(( $(date +%s) - DEV_T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/machine.txt"
lscpu | grep -E 'Model name|^CPU\(s\)' | tee -a "$OUT/machine.txt"
mkdir -p "$DEV_CARRIED/root" && for d in "$DEV_CARRIED"/debs/*.deb; do [ -f "$d" ] && dpkg-deb -x "$d" "$DEV_CARRIED/root"; done
export LD_LIBRARY_PATH=$PWD/$DEV_CARRIED/root/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64
[ -f "$DEV_CARRIED/bins.tar.xz" ] && xz -dc "$DEV_CARRIED/bins.tar.xz" | tar -C /tmp/b -xf -
dev_file() { local h=$1; shift
    xz -dc "$DEV_CARRIED/$h.hdr.xz" > "/tmp/$h.hdr" &&
        python3 bench/make_synthetic_dense.py "/tmp/$h.hdr" "/tmp/$h.gguf" "$@" > "$OUT/synth-$h.log" 2>&1; }
dev_ktrace() {
    local ci=/usr/local/cuda/include
    [ -f $ci/cupti.h ] || ci=/usr/local/cuda/extras/CUPTI/include
    gcc -O2 -shared -fPIC -I$ci bench/cuda/ktrace.c -L/usr/local/cuda/lib64 -L/usr/local/cuda/extras/CUPTI/lib64 -lcupti \
        -o /tmp/libktrace.so; }
