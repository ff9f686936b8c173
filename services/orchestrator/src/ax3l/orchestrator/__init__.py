"""Ax3l orchestrator: the round-robin experiment loop"""
