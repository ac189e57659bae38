"""Plots and tables built from stored Samples only: nothing here measures anything."""
