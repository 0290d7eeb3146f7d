"""goose_theory: closed-form yield, Monte Carlo, fitting and optimisation of speculation trees."""
