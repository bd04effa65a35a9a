#!/bin/sh
# Fails when a module in python/ringmaster/v1 differs from what
# python/generate_api.sh makes of proto/ now (//python:api_generated): a
# proto changed and the modules were not generated again, or one was edited.
set -eu
status=0
for made in python/generated/ringmaster/v1/*.py; do
  kept="python/ringmaster/v1/$(basename "$made")"
  if ! cmp -s "$made" "$kept"; then
    echo "FAIL: $kept is not what proto/ generates now; run: python/generate_api.sh python" >&2
    status=1
  fi
done
[ "$status" = 0 ] && echo "python/ringmaster/v1: $(ls python/generated/ringmaster/v1 | wc -l) modules as proto/ generates them"
exit "$status"
