"""What a benchmark run asks for and keeps: the load plan, the rate search at the SLO, the rows it produces."""
