#!/bin/sh
# Remakes the drafts in this folder: each real XLA:CPU bug present in jaxlib 0.12.0.1 is checked,
# localized and drafted as an upstream issue (xlaprobe upstream). Run from xlaprobe/.
set -e
DB=${DB:-/tmp/xlaprobe-upstream/drafts.db}
mkdir -p "$(dirname "$DB")"
for case in tests/cases/cbrt_subnormal.py tests/cases/dus_shifted_self_update.py \
            tests/cases/fastmath_masked_max.py tests/fuzz_cases/pow_subnormal_base.py \
            tests/fuzz_cases/dot_bf16_f32_unimplemented.py \
            tests/fuzz_cases/reduce_window_negative_padding_abort.py \
            tests/fuzz_cases/conv_negative_padding_lhs_dilation.py \
            tests/fuzz_cases/log_rsqrt_negative_zero.py \
            tests/fuzz_cases/clamp_bool_in_while.py \
            tests/fuzz_cases/exp2_narrow_float_ln2.py; do
    name=$(basename "$case" .py)
    faulty=$(python -c "import runpy; print(runpy.run_path('$case')['FAULTY_CONFIG'])")
    id=$(xlaprobe check "$case" --configs "$faulty,xla:O0,eager,reference" --db "$DB" --json -q \
         | python -c "import json,sys; print([f['id'] for f in json.load(sys.stdin)['findings'] if f['config'] == '$faulty'][0])") || true
    xlaprobe localize "$id" --db "$DB" -q > /dev/null || true
    xlaprobe upstream "$id" --db "$DB" --out "docs/upstream/$name.md"
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
