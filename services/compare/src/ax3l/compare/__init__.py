"""``ax3l-compare``: each proposer's experiment repeated on throwaway databases, compared."""
