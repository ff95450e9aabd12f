# Sourced by the GPU scripts: samples the GPU's utilisation and memory in
# use once a second into a CSV file while a phase runs (nothing where
# nvidia-smi is missing), for the share of wall time the GPU is busy and
# the phase's peak memory. The memory is what the process holds, its
# allocator's pools included: an upper bound on what the phase needs.
monitor() { # file
  command -v nvidia-smi > /dev/null || return 0
  nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits -lms 1000 \
    > "$1" 2> /dev/null &
  echo $! > "$1.pid"
}
unmonitor() { # file
  [[ -f "$1.pid" ]] && kill "$(cat "$1.pid")" 2> /dev/null && rm -f "$1.pid"
  return 0
}
