"""gpulab graders: static manifest rules, live outcome checks, evidence bundles and reports."""
