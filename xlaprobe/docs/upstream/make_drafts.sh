#!/bin/sh
# Remakes the drafts in this folder: each real XLA:CPU bug present in jaxlib 0.12.0.1 is checked,
# localized and drafted as an upstream issue (xlaprobe upstream). Run from xlaprobe/.
# A flaky case (tests/fuzz_cases/flaky/: wrong in some fresh processes only) is checked and
# drafted up to FLAKY_TRIES times, each in fresh processes, until it fails and its reproducer
# shows the fault; a case that never does keeps its draft as it was (one line on stderr says so)
# and the other drafts are still made.
set -e
DB=${DB:-/tmp/xlaprobe-upstream/drafts.db}
FLAKY_TRIES=${FLAKY_TRIES:-6}
mkdir -p "$(dirname "$DB")"

# The id of the newest check's finding under configuration $2 (empty: it did not fail).
finding_of() {
    python -c "import json,sys; print(next((f['id'] for f in json.load(sys.stdin)['findings'] if f['config'] == '$1'), ''))"
}

draft() {  # CASE TRIES
    case=$1 tries=$2
    name=$(basename "$case" .py)
    faulty=$(python -c "import runpy; print(runpy.run_path('$case')['FAULTY_CONFIG'])")
    try=0
    while [ "$try" -lt "$tries" ]; do
        try=$((try + 1))
        id=$(xlaprobe check "$case" --configs "$faulty,xla:O0,eager,reference" --db "$DB" \
             --json -q | finding_of "$faulty") || true
        [ -n "$id" ] || continue
        xlaprobe localize "$id" --db "$DB" -q > /dev/null || true
        # Written beside the draft and moved over it only when the reproducer showed the fault.
        if xlaprobe upstream "$id" --db "$DB" --out "docs/upstream/$name.md.new"; then
            mv "docs/upstream/$name.md.new" "docs/upstream/$name.md"
            return 0
        fi
    done
    rm -f "docs/upstream/$name.md.new"
    echo "make_drafts: $name did not fail with a reproducer that shows it in $tries tries;" \
         "docs/upstream/$name.md is kept as it was" >&2
}

for case in tests/cases/cbrt_subnormal.py tests/cases/dus_shifted_self_update.py \
            tests/cases/fastmath_masked_max.py tests/fuzz_cases/pow_subnormal_base.py \
            tests/fuzz_cases/dot_bf16_f32_unimplemented.py \
            tests/fuzz_cases/reduce_window_negative_padding_abort.py \
            tests/fuzz_cases/conv_negative_padding_lhs_dilation.py \
            tests/fuzz_cases/log_rsqrt_negative_zero.py \
            tests/fuzz_cases/clamp_bool_in_while.py \
            tests/fuzz_cases/exp2_narrow_float_ln2.py; do
    draft "$case" 1
done
for case in tests/fuzz_cases/flaky/*.py; do
    draft "$case" "$FLAKY_TRIES"
done
# Each draft ends with what a search of the trackers found (threads.json, written by hand from
# the search; rerun it before filing).
python - <<'PY'
import json, pathlib
here = pathlib.Path("docs/upstream")
for name, text in json.loads((here / "threads.json").read_text()).items():
    path = here / f"{name}.md"
    body = path.read_text().split("\n## Upstream thread\n")[0].rstrip("\n")
    path.write_text(body + "\n\n## Upstream thread\n\n" + text + "\n")
PY
