from handler.main import main

main()
