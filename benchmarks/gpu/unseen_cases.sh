# The five unseen shapes of issue 16's single-GPU check (chosen before their first run, none of the thirteen
# built-in cases and none on the profile's grid), as advisor_single_gpu.py --case arguments, and
# single_gpu_cases: the thirteen built-in cases, then these five, each with its results file and log.  Sourced
# by the advisor's device scripts, so that every run times the same shapes the same way.
UNSEEN_CASES=(
  --case name=u-llama-mha-6k,family=llama,layers=12,hidden=2048,heads=16,kv_heads=16,ffn=5504,vocab=32000,seq=6144,mb=1
  --case name=u-gpt-op,family=gpt,layers=20,hidden=1792,heads=14,kv_heads=14,ffn=7168,vocab=50304,seq=2048,mb=2,ac=op
  --case name=u-llama-full,family=llama,layers=28,hidden=3072,heads=24,kv_heads=8,ffn=8192,vocab=128256,seq=2048,mb=3,ac=full
  --case name=u-gpt-small,family=gpt,layers=10,hidden=640,heads=10,kv_heads=10,ffn=2560,vocab=50304,seq=1536,mb=12,upcast=0
  --case name=u-llama-op-8k,family=llama,layers=14,hidden=1536,heads=12,kv_heads=4,ffn=4096,vocab=128256,seq=8192,mb=1,ac=op
)

# single_gpu_cases W RUN DATE T0: advisor_single_gpu.py's thirteen cases, then the unseen shapes, into W (the
# results with their .json sidecars, single.log, unseen.log), each stage's exit status and time (since T0, in
# $SECONDS) appended to W/README.txt.
single_gpu_cases() {
  local w=$1 r=$2 d=$3 t0=$4
  timeout 200 python3 benchmarks/advisor_single_gpu.py --out "$w/advisor-single-gpu-${r}_h200x1_$d.txt" \
      > "$w/single.log" 2>&1; echo "single rc=$? at $((SECONDS - t0)) s" | tee -a "$w/README.txt"
  timeout 170 python3 benchmarks/advisor_single_gpu.py "${UNSEEN_CASES[@]}" \
      --out "$w/advisor-single-gpu-unseen-${r}_h200x1_$d.txt" > "$w/unseen.log" 2>&1
  echo "unseen rc=$? at $((SECONDS - t0)) s" | tee -a "$w/README.txt"
}
