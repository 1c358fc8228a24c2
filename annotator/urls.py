urlpatterns = [
    # Videos and import
    # Jobs
    # Similarity
    # Pair picking and review
    # Captions
    # Exports
]
