# PYTHONSTARTUP for kernels started by the integration tests: install the network guard.
# IPython runs this file with its own directory on sys.path, so net_guard imports from here.
__import__("net_guard").install_from_env()
