
	seq_empty