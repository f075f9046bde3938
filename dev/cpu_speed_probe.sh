# per-core host speed on the H200 from the repository root; writes $OUT/core_probe.txt
P=$OUT/core_probe.txt
{ lscpu | egrep "Model name|Thread|Core|Socket|NUMA|MHz"; nproc; grep -c processor /proc/cpuinfo; } > $P 2>&1
for c in $(seq 0 $(( $(nproc) - 1 ))); do echo -n "core $c: " >> $P; taskset -c $c python3 dev/cpu_speed_probe.py >> $P 2>&1; done
for i in 1 2 3 4 5 6 7 8; do echo -n "free $i: " >> $P; python3 dev/cpu_speed_probe.py >> $P 2>&1; done
for c in 0 5 10 15; do echo -n "again core $c: " >> $P; taskset -c $c python3 dev/cpu_speed_probe.py >> $P 2>&1; done
cat $P
