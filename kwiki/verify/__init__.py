"""`kwiki verify`'s pipeline: plan -> build -> run -> records -> claims -> write-back -> history."""
