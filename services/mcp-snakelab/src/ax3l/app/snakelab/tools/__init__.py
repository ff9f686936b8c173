"""Ax3l's SnakeLab MCP stdio server: submit_single_value and submit_pair_values"""
