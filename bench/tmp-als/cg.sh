#!/bin/bash
# usage: cg.sh ALS(0|1) N
cd /work/main
ALSV=$1 N=$2
export TARGET=$SANDBOX_URL TOKEN=$SANDBOX_TOKEN PORT=4130
[ "$ALSV" = 1 ] && export ALS=1
rm -f /tmp/cg.out.*
valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out.%p node --import tsx bench/bare-proxy.ts >/tmp/cg.log 2>&1 &
VP=$!
for i in $(seq 1 600); do curl -sf localhost:4130/workflows >/dev/null && break; sleep 0.5; done
if [ "$N" -gt 0 ]; then npx autocannon -c 10 -a $N http://127.0.0.1:4130/workflows >/dev/null 2>&1; fi
kill -INT $VP; wait $VP
grep -h "^summary\|^totals" /tmp/cg.out.* | head -2
