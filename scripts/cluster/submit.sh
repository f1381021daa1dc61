#!/usr/bin/env bash
# Submits a what-if of every rank of a job to Slurm: one array task a rank, then the merge once
# every task succeeded (docs/cluster.md).
#   submit.sh [-o OUT] [-p N] SNAPSHOT... [-- WHATIF OPTIONS...]
# SNAPSHOT: a rank's file, or a folder (its *.pickle files, not *.oom.pickle). OUT (default
# vramscope-job-<date>): files.txt (the list, one absolute path a line), results/rank-I.json,
# logs/, then report.txt and report.json. -p N: at most N tasks at once (sbatch --array=...%N).
# Options for sbatch itself come from its environment: SBATCH_PARTITION, SBATCH_ACCOUNT,
# SBATCH_TIMELIMIT, ... VRAMSCOPE: the command the tasks run (default `vramscope`).
# Prints the two job ids: the array's, then the merge's.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out="vramscope-job-$(date +%Y%m%d-%H%M%S)"
parallel=""
usage() { echo "usage: submit.sh [-o OUT] [-p N] SNAPSHOT... [-- WHATIF OPTIONS...]" >&2; exit 2; }

inputs=()
while [ $# -gt 0 ]; do
  case "$1" in
    -o) [ $# -ge 2 ] || usage; out=$2; shift 2 ;;
    -p) [ $# -ge 2 ] || usage; parallel="%$2"; shift 2 ;;
    -h | --help) usage ;;
    --) shift; break ;;
    *) inputs+=("$1"); shift ;;
  esac
done
[ ${#inputs[@]} -gt 0 ] || usage
command -v sbatch > /dev/null || { echo "submit.sh: no sbatch on PATH (run it where you submit Slurm jobs)" >&2; exit 2; }

mkdir -p "$out/results" "$out/logs"
out=$(cd "$out" && pwd)
list="$out/files.txt"
: > "$list"
for input in "${inputs[@]}"; do
  if [ -d "$input" ]; then
    find "$(cd "$input" && pwd)" -maxdepth 1 -type f -name '*.pickle' ! -name '*.oom.pickle' | sort -V >> "$list"
  elif [ -f "$input" ]; then
    echo "$(cd "$(dirname "$input")" && pwd)/$(basename "$input")" >> "$list"
  else
    echo "submit.sh: $input: no such file or folder" >&2
    exit 2
  fi
done
count=$(wc -l < "$list")
[ "$count" -gt 0 ] || { echo "submit.sh: no snapshot in ${inputs[*]}" >&2; exit 2; }

array=$(sbatch --parsable --array="0-$((count - 1))$parallel" --output="$out/logs/rank-%a.log" \
  "$here/whatif-array.sbatch" "$list" "$out/results" "$@")
array=${array%%;*}
merge=$(sbatch --parsable --dependency="afterok:$array" --kill-on-invalid-dep=yes --output="$out/logs/merge.log" \
  "$here/merge.sbatch" "$out/results" "$out")
merge=${merge%%;*}
echo "submitted $count ranks: array job $array, merge job $merge (after every task succeeded); report: $out/report.txt" >&2
echo "$array $merge"
