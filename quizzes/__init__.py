"""gpulab quizzes: question banks, the ipywidgets quiz, answer storage and learning-gain reports.

This package stands alone: it imports nothing from ``cluster``, ``graders`` or ``labs``.
"""
