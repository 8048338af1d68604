"""What a run leaves and what readers need: the record format, the results store's rows (read, append), series
statistics, judge, trace, standing, ladders as data. Below the pipeline (kwiki.verify), which writes it, and the
site, the agents and `kwiki check`, which read it."""
