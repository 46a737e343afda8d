# The five unseen shapes of issue 16's single-GPU check (chosen before their first run, none of the thirteen
# built-in cases and none on the profile's grid), as advisor_single_gpu.py --case arguments.  Sourced by
# advisor_busy.sh and advisor_modes.sh, so that every run times the same shapes.
UNSEEN_CASES=(
  --case name=u-llama-mha-6k,family=llama,layers=12,hidden=2048,heads=16,kv_heads=16,ffn=5504,vocab=32000,seq=6144,mb=1
  --case name=u-gpt-op,family=gpt,layers=20,hidden=1792,heads=14,kv_heads=14,ffn=7168,vocab=50304,seq=2048,mb=2,ac=op
  --case name=u-llama-full,family=llama,layers=28,hidden=3072,heads=24,kv_heads=8,ffn=8192,vocab=128256,seq=2048,mb=3,ac=full
  --case name=u-gpt-small,family=gpt,layers=10,hidden=640,heads=10,kv_heads=10,ffn=2560,vocab=50304,seq=1536,mb=12,upcast=0
  --case name=u-llama-op-8k,family=llama,layers=14,hidden=1536,heads=12,kv_heads=4,ffn=4096,vocab=128256,seq=8192,mb=1,ac=op
)
