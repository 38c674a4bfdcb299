"""Pure domain core: no boto3, no I/O, no clocks. Time is always an argument."""
