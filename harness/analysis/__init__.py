"""Statistics and comparisons over stored Samples: nothing here measures anything."""
