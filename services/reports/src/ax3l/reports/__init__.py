"""Ax3l reports: the experiment in the browser and its REST API"""
