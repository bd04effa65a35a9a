#!/bin/sh
# Writes a C++ source holding each given python/ file, so that the worker
# carries the ringmaster package and puts it on its ranks' PYTHONPATH.
set -eu
echo '#include "python/python_module.h"'
echo 'namespace ringmaster {'
echo 'const std::vector<PythonFile>& PythonModuleFiles() {'
echo '  static const auto* files = new std::vector<PythonFile>{'
for f in "$@"; do
  if grep -q ')RMPY"' "$f"; then echo "$f holds the raw-string delimiter" >&2; exit 1; fi
  printf '      {"%s", R"RMPY(' "${f#*python/}"
  cat "$f"
  echo ')RMPY"},'
done
echo '  };'
echo '  return *files;'
echo '}'
echo '}  // namespace ringmaster'
