#!/bin/sh
# Delete everything that holds a lab solution or solved work from a copy of the source tree, before it becomes the
# learner image: course/class/Containerfile runs this in its first stage and the image copies only the result, so
# no layer of the image carries a solution, whatever build context it was given.
#
#   course/class/withhold-solutions.sh SOURCE_TREE
#
# What goes: every labs/*/solution folder, and labs.classroom.solutions.CHECKOUT_PATHS (the tests with their solved
# bundles, the git history, a build folder, a self-paced learner's lab folders, the nbgrader demo's mistakes and
# solved students); tests/unit/test_learner_image_solutions.py checks the two lists agree. It leaves
# labs/SOLUTIONS-WITHHELD, so the labs still load without their solution folders and `gpulab lab solve` says why
# it is refused.
set -eu
root=${1:?usage: withhold-solutions.sh SOURCE_TREE}
cd "$root"
if ! test -f pyproject.toml || ! test -d labs; then
  echo "withhold-solutions.sh: $root is not a gpulab source tree" >&2
  exit 1
fi
rm -rf tests .git build course/gpulab-labs course/nbgrader/demo course/nbgrader/submitted \
  course/nbgrader/autograded course/nbgrader/feedback course/nbgrader/gradebook.db
for folder in labs/*/solution; do
  if [ -e "$folder" ]; then rm -rf "$folder"; fi
done
echo "The lab solutions were removed from this copy of gpulab (course/class/withhold-solutions.sh)." \
  > labs/SOLUTIONS-WITHHELD
left=$(find . -path ./labs/SOLUTIONS-WITHHELD -prune -o \( -name solution -o -name '*.solved.json' \) -print)
if [ -n "$left" ]; then
  echo "withhold-solutions.sh: solutions are still in the tree: $left" >&2
  exit 1
fi
echo "withheld the lab solutions from $root"
