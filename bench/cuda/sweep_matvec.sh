#!/usr/bin/env bash
# Sweeps the compile-time knobs of the int8 decode matvec (MVQ_* in
# src/compute/cuda/matvec_q8.cu) on a GPU machine, in one call: builds
# bench_matvec once per setting (kernels only, one build directory each, the
# knobs passed as -D in CMAKE_CUDA_FLAGS, the builds in parallel), runs them
# one after another, and prints one table per weight type: shape x setting ->
# GB/s of quantize_q8 + matvec_q8 at 1 token (bench_matvec's int8 rows), with
# the registers and spills ptxas reported for each setting.
#
#   bench/cuda/sweep_matvec.sh                    # the settings below
#   bench/cuda/sweep_matvec.sh "name=-DMVQ_R=1 -DMVQ_SM_WARPS=24" ...   # your own
#
# Env: OUT (logs; default ./sweep-out), SWEEP_BUILD (build directories;
# default /tmp/ts-sweep), SWEEP_JOBS (default nproc), SWEEP_TYPES (default
# "Q4_K Q6_K Q4_0 Q8_0"), SWEEP_MODELS (bench_matvec's model substrings,
# comma-separated; default "smollm2,qwen2-7b", "" for all three),
# SWEEP_BATCH=1 (add the 4- and 8-token gate_up runs),
# SWEEP_BASE=DIR (a source tree of another version, e.g. the first kernel
# from `git archive 707eaa0`, added as a column named "base").
#
# Files under $OUT: build.log (configure, compile, ptxas), bench.log (every
# RESULT line per setting), summary.txt (the tables). Run time on a 16-core
# H200 machine: about 1-2 minutes of parallel builds, ~10 s of benchmark per
# setting.
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
OUT_DIR=${OUT:-$ROOT/sweep-out}
BROOT=${SWEEP_BUILD:-/tmp/ts-sweep}
JOBS=${SWEEP_JOBS:-$(nproc)}
TYPES=${SWEEP_TYPES:-Q4_K Q6_K Q4_0 Q8_0}
MODELS=${SWEEP_MODELS-smollm2,qwen2-7b}
mkdir -p "$OUT_DIR" "$BROOT" || exit 1
BUILD_LOG=$OUT_DIR/build.log
BENCH_LOG=$OUT_DIR/bench.log
SUMMARY=$OUT_DIR/summary.txt
: >"$BUILD_LOG"
: >"$BENCH_LOG"

# name=flags; the first is the default (no flags). Each changes one thing
# from the default (MVQ_WARPS 4, MVQ_SM_WARPS 20, MVQ_R 2, MVQ_RING 8,
# MVQ_DIRECT 1, MVQ_LDG 1, MVQ_WAVES 1), except where registers force a pair.
if [ $# -gt 0 ]; then
    SETTINGS=("$@")
else
    SETTINGS=(
        "default="
        "ring4=-DMVQ_RING=4"                          # one item per warp: no prefetch (depth 1)
        "ring12=-DMVQ_RING=12 -DMVQ_SM_WARPS=16"      # deeper ring, 16 warps/SM (128 registers)
        "r1=-DMVQ_R=1 -DMVQ_SM_WARPS=24"              # one row per group, 24 warps/SM (80 registers)
        "w8=-DMVQ_WARPS=8 -DMVQ_SM_WARPS=16"          # 8-warp blocks (2 blocks/SM)
        "staged=-DMVQ_DIRECT=0"                       # Q4_K/Q5_K through shared memory too
        "ldg0=-DMVQ_LDG=0"                            # weights through L1 (plain ld.global.nc)
        "ldg2=-DMVQ_LDG=2"                            # + L2::256B prefetch hint
        "waves4=-DMVQ_WAVES=4"                        # 4 waves of blocks: shorter runs
    )
fi

GEN=()
command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja)
# the GPU's own architecture only (half the compile time of sm_90a + PTX)
CAP=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
case "$CAP" in
90) GENCODE="-gencode=arch=compute_90a,code=sm_90a" ;;
[0-9][0-9] | [0-9][0-9][0-9]) GENCODE="-gencode=arch=compute_$CAP,code=sm_$CAP" ;;
*) GENCODE="-gencode=arch=compute_90a,code=sm_90a" ;;
esac

START=$(date +%s)
names=()
declare -A FLAGS SRC
for s in "${SETTINGS[@]}"; do
    n=${s%%=*}
    names+=("$n")
    FLAGS[$n]=${s#*=}
    SRC[$n]=$ROOT
done
if [ -n "${SWEEP_BASE:-}" ]; then
    if [ -f "$SWEEP_BASE/src/compute/cuda/matvec_q8.cu" ]; then
        names=(base "${names[@]}")
        FLAGS[base]=""
        SRC[base]=$SWEEP_BASE
    else
        echo "SWEEP_BASE=$SWEEP_BASE has no src/compute/cuda/matvec_q8.cu: no base column" | tee -a "$BUILD_LOG"
    fi
fi

# ---------------------------------------------------------------- builds
n_set=${#names[@]}
per=$(( JOBS / n_set ))
[ "$per" -ge 2 ] || per=2
echo "== building ${n_set} settings ($GENCODE, -j$per each, in parallel)"
for n in "${names[@]}"; do
    (
        b=$BROOT/$n
        {
            echo "==== $n: ${FLAGS[$n]:-(defaults)} [${SRC[$n]}]"
            cmake -S "${SRC[$n]}" -B "$b" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DTS_CUDA=ON -DTS_CUDA_KERNELS_ONLY=ON \
                -DTS_CUDA_PTXAS_VERBOSE=ON "-DTS_CUDA_GENCODE=$GENCODE" "-DCMAKE_CUDA_FLAGS=${FLAGS[$n]}" >/dev/null &&
                cmake --build "$b" --target bench_matvec -j "$per"
            echo "==== $n: exit $?"
        } >"$b.log" 2>&1
    ) &
done
wait
for n in "${names[@]}"; do
    cat "$BROOT/$n.log" >>"$BUILD_LOG"
    # ptxas: registers and spills of every mv_q_q8<type, tokens> instantiation
    awk -v set="$n" '
        /Compiling entry function|Function properties for/ { f = $0; next }
        /bytes spill stores/ { match($0, /[0-9]+ bytes spill stores/); sp = substr($0, RSTART, RLENGTH) + 0 }
        /Used [0-9]+ registers/ && f ~ /mv_q_q8I/ {
            match(f, /mv_q_q8ILi[0-9]+ELi[0-9]+E/); k = substr(f, RSTART, RLENGTH)
            gsub(/mv_q_q8ILi|E$/, "", k); split(k, p, "ELi")
            for (i = 1; i <= NF; i++) if ($i == "Used") r = $(i+1)
            nt = p[2]; if (!(nt in lo) || r < lo[nt]) lo[nt] = r; if (r > hi[nt]) hi[nt] = r
            if (sp > 0) spill[nt] = spill[nt] + 1
            seen = 1
        }
        END {
            if (!seen) { print set ": no ptxas report"; exit }
            s = set ":"
            for (nt = 1; nt <= 8; nt *= 2) if (nt in lo) s = s sprintf(" t%d %d-%d regs%s", nt, lo[nt], hi[nt], spill[nt] ? " (" spill[nt] " spill)" : "")
            print s
        }' "$BROOT/$n.log" >"$BROOT/$n.ptx.new"
    # an up-to-date build compiles nothing: keep the last report then
    if grep -q "no ptxas report" "$BROOT/$n.ptx.new" && [ -f "$BROOT/$n.ptx.txt" ]; then
        rm -f "$BROOT/$n.ptx.new"
    else
        mv "$BROOT/$n.ptx.new" "$BROOT/$n.ptx.txt"
    fi
done
echo "builds: $(( $(date +%s) - START ))s"

# ---------------------------------------------------------------- runs
for n in "${names[@]}"; do
    exe=$BROOT/$n/bench_matvec
    if [ ! -x "$exe" ]; then
        echo "== $n: build failed (see build.log)"
        continue
    fi
    echo "== $n"
    t0=$(date +%s)
    # one call per model: a base tree's bench_matvec takes one substring
    IFS=, read -r -a models <<<"$MODELS"
    [ ${#models[@]} -gt 0 ] || models=("")
    for mdl in "${models[@]}"; do
        # shellcheck disable=SC2086
        BENCH_MATVEC_PATHS=int8 BENCH_MATVEC_BATCH=$([ "${SWEEP_BATCH:-0}" = 1 ] && echo 1 || echo 0) \
            "$exe" "$mdl" $TYPES 2>&1 | sed "s/^/$n /" >>"$BENCH_LOG"
    done
    echo "   $(( $(date +%s) - t0 ))s"
done

# ---------------------------------------------------------------- table
{
    echo "== int8 matvec sweep ($(date -u +%Y-%m-%dT%H:%MZ), $(( $(date +%s) - START ))s)"
    nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader 2>/dev/null | head -1
    echo "settings:"
    for n in "${names[@]}"; do
        src=""
        [ "${SRC[$n]}" = "$ROOT" ] || src=" [source: ${SRC[$n]}]"
        res=$(grep -c "^$n RESULT matvec" "$BENCH_LOG")
        [ "$res" -gt 0 ] || res="0: $(grep -m1 "^$n " "$BENCH_LOG" | cut -c1-100)"
        printf '  %-8s %s%s (results: %s)\n' "$n" "${FLAGS[$n]:-(defaults)}" "$src" "$res"
    done
    echo "ptxas (mv_q_q8 registers per token count; instantiations that spill):"
    for n in "${names[@]}"; do [ -f "$BROOT/$n.ptx.txt" ] && sed 's/^/  /' "$BROOT/$n.ptx.txt"; done
    awk -v names="${names[*]}" '
        BEGIN { ns = split(names, nm, " ") }
        $2 == "RESULT" && $3 == "copy" { copy[$1] = $6 }
        $2 == "RESULT" && $3 == "matvec" && $6 == "int8" {
            set = $1; shape = $4; type = $5; t = $7; v = $8
            key = shape " " t
            if (!(key in seenk)) { seenk[key] = 1; keys[++nk] = key }
            if (!(type in seent)) { seent[type] = 1; types[++nt] = type }
            gbs[type, key, set] = v
        }
        END {
            line = sprintf("%-30s", "copy ceiling GB/s")
            for (i = 1; i <= ns; i++) line = line sprintf(" %9s", copy[nm[i]] != "" ? copy[nm[i]] : "-")
            print ""; print line
            for (ti = 1; ti <= nt; ti++) {
                ty = types[ti]
                print ""
                line = sprintf("%-30s", ty " int8 GB/s")
                for (i = 1; i <= ns; i++) line = line sprintf(" %9s", nm[i])
                print line
                for (i = 1; i <= ns; i++) { lsum[i] = 0; lcnt[i] = 0; bsum[i] = 0; bcnt[i] = 0 }
                for (k = 1; k <= nk; k++) {
                    key = keys[k]
                    if (!((ty, key, nm[1]) in gbs)) continue
                    split(key, kp, " ")
                    line = sprintf("%-30s", kp[1] (kp[2] == "t=1" ? "" : " " kp[2]))
                    for (i = 1; i <= ns; i++) {
                        v = gbs[ty, key, nm[i]]
                        line = line sprintf(" %9s", v != "" ? v : "-")
                        if (v != "" && v > 0 && kp[2] == "t=1") {
                            if (kp[1] ~ /^qwen2-7b/) { lsum[i] += log(v); lcnt[i]++ }
                            if (kp[1] ~ /^smollm2/) { bsum[i] += log(v); bcnt[i]++ }
                        }
                    }
                    print line
                }
                line = sprintf("%-30s", "geomean qwen2-7b")
                for (i = 1; i <= ns; i++) line = line sprintf(" %9s", lcnt[i] ? sprintf("%.0f", exp(lsum[i] / lcnt[i])) : "-")
                print line
                line = sprintf("%-30s", "geomean smollm2-135m")
                for (i = 1; i <= ns; i++) line = line sprintf(" %9s", bcnt[i] ? sprintf("%.0f", exp(bsum[i] / bcnt[i])) : "-")
                print line
            }
        }' "$BENCH_LOG"
} >"$SUMMARY"
cat "$SUMMARY"
