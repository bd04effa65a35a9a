// The `ringmaster` Python package (python/ringmaster/), carried by the
// worker, which writes it below its state dir and puts it on its ranks'
// PYTHONPATH.
#ifndef RINGMASTER_PYTHON_PYTHON_MODULE_H_
#define RINGMASTER_PYTHON_PYTHON_MODULE_H_

#include <string>
#include <vector>

namespace ringmaster {

struct PythonFile {
  const char* path;  // "ringmaster/__init__.py"
  const char* content;
};

const std::vector<PythonFile>& PythonModuleFiles();

}  // namespace ringmaster

#endif  // RINGMASTER_PYTHON_PYTHON_MODULE_H_
