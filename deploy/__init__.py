"""Put a bundle to work: the HTTP server (`shrinkbert serve`) and corpus runs (`shrinkbert predict`).

Both sit on the bundle's own torch-free `Predictor`: what the server or a corpus run returns for a
row is what `Predictor` returns for it.
"""
