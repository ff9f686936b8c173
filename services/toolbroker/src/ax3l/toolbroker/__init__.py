"""Ax3l toolbroker: validates, deduplicates and submits tool calls over ZeroMQ"""
