"""What one request's view is: the budget, the working view and its entries, the plan filling the window."""
