"""The Streamlit what-if explorer (``goose app`` or ``streamlit run app/explorer.py``).

``explorer.py`` is the page; ``sections/`` its parts; ``compute.py`` and ``compute_io.py`` the
cached computations (no Streamlit); ``charts.py`` the pure altair chart builders.
"""
